"""The pieces of tiedlm's trainer."""
