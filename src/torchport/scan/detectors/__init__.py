"""The Python detectors of ``torchport scan``, one module per rule family.

``state`` holds what every detector works with (names, bindings, findings);
``core`` walks the module (dispatch, guarded code); each family module (``devices``,
``cuda_runtime``, ``mixed_precision``, ``backend_flags``, ``distributed``,
``native_code``, ``dependencies``, ``dtypes``, ``torch_xla``) imports the ids of
the rules it reports from ``scan/rules.py`` as named constants, lists them in
``RULE_IDS``, and declares what it handles in its detector class's tables;
``analyzer`` composes them into the one visitor that ``python.analyze`` runs.
"""
