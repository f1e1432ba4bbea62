def app():
    return {"model": None}
