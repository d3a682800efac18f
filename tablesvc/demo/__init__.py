"""``make demo``: the main job on an embedded default, no arguments needed."""
