"""The load layer: the harness, the sessions, the shapes (when each request goes) and the
generator watching itself (monitor)."""

import gc

_held = False


def hold_collector() -> None:
    """No cyclic garbage collection until the load starts (``release_collector``): starting a
    run allocates a few hundred thousand objects that live as long as the process (modules,
    classes, the spec, the workload), and the ~120 collections they set off were ~0.05 s of
    its ~0.33 s of start-up CPU, finding nothing to free (issue 50 §2). For the command line's
    run, ramp and probe only: a server, a sweep or a report is never left without collection."""
    global _held
    if gc.isenabled():
        gc.disable()
        _held = True


def release_collector() -> None:
    """Before the load: what start-up made is frozen out of every later collection (so the
    collections during the load, which pause the event loop, do not walk it), and collection
    is on again. Nothing when ``hold_collector`` did not hold it."""
    global _held
    if _held:
        _held = False
        gc.freeze()
        gc.enable()
