"""CMSIS-NN building blocks for the ``--byoc cmsis-nn`` backend: locating and building the
library (library.py), its scratch sizes per feature set (scratch.py), and aotc's quantisation
data turned into CMSIS-NN's arguments and calls (params.py)."""
