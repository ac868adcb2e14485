"""Lowering: each scheduled step built into a loop-nest kernel by its op (ops/), in the loop IR
(loops/), run by its schedule (schedules/), with what the graph function passes it."""
