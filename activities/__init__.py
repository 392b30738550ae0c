"""Side effects, one module per actuator. Each activity takes one model and returns one."""
