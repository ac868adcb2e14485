"""Math ops: elementwise arithmetic and activations, comparison and logic, reductions, linear
algebra, and the ops that walk an axis in order (TopK, CumSum, Trilu)."""
