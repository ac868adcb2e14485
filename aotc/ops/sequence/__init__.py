"""Sequence ops: recurrent layers (RNN, GRU, LSTM), attention, linear attention, and signal
processing (DFT, STFT, windows, mel filters)."""
