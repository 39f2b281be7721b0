"""version: stage to be built (see ../shared/DESIGN.md)."""
