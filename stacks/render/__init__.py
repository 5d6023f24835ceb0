"""A stack's Pulumi program run offline under Pulumi's mocks, every resource recorded (offline),
and what `python -m stacks render` writes from it for review (write).

Imports config only; the program itself (`__main__.py`, components/) is run, not imported.
"""
