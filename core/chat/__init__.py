"""`specdec-tui chat`: the headless chat, one decode loop printed to the terminal."""
