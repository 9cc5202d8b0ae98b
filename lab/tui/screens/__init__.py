"""Screens over the lab: help and the dialogs that pick chaos targets."""
