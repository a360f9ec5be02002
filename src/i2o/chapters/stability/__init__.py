"""The stability chapter (Figure 5): its claims and the conclusions written from them."""
