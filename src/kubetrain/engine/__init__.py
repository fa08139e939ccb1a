"""The pure job engine: observed replicas and a clock in, a Decision out. No I/O."""
