"""The deq-gaps chapter (Figures 2, G.1, G.2, G.4): its claims and the conclusions from them."""
