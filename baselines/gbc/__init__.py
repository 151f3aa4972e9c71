"""GBC (CREDIT.md §19): gradient-based connections between agents, and blame through them."""
