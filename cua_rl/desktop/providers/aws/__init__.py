"""Desktops on EC2 instances: one VM per desktop, or a fleet of hosts each serving
many desktop slots."""
