"""The lab's widgets, one per file; each has `show(model)`, called by the screen's timer."""
