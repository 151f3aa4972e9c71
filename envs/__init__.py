"""Environment families: one package each (search, tools, text, web)."""
