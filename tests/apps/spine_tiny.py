"""A well-behaved tiny app, written as a user would."""
from spine_common import tiny_app


def app():
    return tiny_app()


def other_entry():
    return tiny_app(name="other")
