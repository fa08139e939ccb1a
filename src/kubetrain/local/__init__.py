"""The local substrate: every replica a process group on this machine."""
