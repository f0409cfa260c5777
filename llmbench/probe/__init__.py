"""Probes: server state pollers (scrape) and the router-versus-direct comparison (router)."""
