"""The drivers: the contract in `base`, the built-in implementations beside it."""
