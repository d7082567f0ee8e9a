"""The driver contract: the Driver protocol, what a driver is lent, and the driver registry.

It sits below the engine, the workflow format and the driver implementations,
so each of them may use it; it imports only core. Third-party drivers import
the same names from `normalize`.
"""
