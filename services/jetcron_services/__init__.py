"""jetcron services: each a process that wires core decisions to the bus."""
