"""Image ops: resizing, sampling at run-time positions (GridSample, RoiAlign, DeformConv),
AffineGrid, CenterCropPad, Col2Im."""
