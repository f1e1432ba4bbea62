"""Commands on other machines: ``torchport evaluate|trace|check --on TARGET``.

``targets`` names the machines (``local``, ``ssh://[user@]host[:port]``, an ssh
config alias) and builds every ssh command line from quoted arguments;
``ship`` packs the app's folder and torchport itself (a wheel of the running
code); ``remote_scripts`` holds the fixed programs the remote's Python runs
before torchport is installed there, ``detached`` what torchport runs there
once it is; ``runner`` runs the targets concurrently, streams their progress,
brings the results home, writes the combined answer and reattaches
(``torchport collect``); ``predictions`` holds the trace's verdicts against
what the targets measured; ``commands`` is the command line's side.
"""
