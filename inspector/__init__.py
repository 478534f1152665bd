"""trt-inspect's front ends: the headless CLI and the Textual app (loaded only when opened)."""
