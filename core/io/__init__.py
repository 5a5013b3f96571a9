"""Files in and out: atomic writes, bounded reads of untrusted files, text shown to users."""
