"""Evaluation on other machines: ``torchport evaluate --on TARGET``.

``targets`` names the machines (``local``, ``ssh://[user@]host[:port]``, an ssh
config alias) and builds every ssh command line from quoted arguments;
``ship`` packs the app's folder and torchport itself (a wheel of the running
code); ``remote_scripts`` holds the fixed programs run on the remote;
``runner`` runs the targets concurrently, streams their progress, brings the
results home and writes the combined answer; ``collect`` reattaches to runs
whose connection dropped.
"""
