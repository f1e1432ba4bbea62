def app():
    settings = {"lr": 0.1}
    return settings["learning_rate"]  # line 3: KeyError raised in the user's factory
