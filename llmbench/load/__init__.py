"""Load shapes: when each request goes (arrivals, closed loop, virtual users, ramp)."""
