"""``torchport trace``: what one training step does, op by op, and what that
means on each target accelerator.

* ``tracer``   dispatch-level op tracer with user-line attribution;
* ``job``      the worker job that traces K steps of the app on the CPU;
* ``findings`` the rule table (TR101...) and its detectors;
* ``support``  per-target op support (live lookup, shipped tables);
* ``memory``   memory-fit estimate against the chip catalogue;
* ``verdict``  one verdict per target, and the check against a measured xla run;
* ``analysis`` worker result -> the ``trace`` section of the result document;
* ``report``   markdown and terminal rendering; ``stage`` the evaluate stage.
"""
