"""How much of a pool may be out at once: the disruption budget and its leases, the storm
breaker and its slow start, shares held by people, who blocks whom."""
