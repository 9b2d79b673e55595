"""Accelerators, one module per vendor: what gpuplay asks of a device beyond torch's view of it.

Each module answers with figures or with a reason string, never an exception: a vendor that has
nothing to give (no library, no device, a driver too old) is a line of text on the screen.
"""
