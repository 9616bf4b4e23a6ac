"""Run as another user on a shared socket: what one user may keep over all its connections.
`userLimits.py MOUNTPOINT`. Prints one line per step: what the server answered."""
import json, os, socket, sys
mount = sys.argv[1]
where = json.loads(os.getxattr(mount, "user.coordfs.control"))

def connect():
    connection = socket.socket(socket.AF_UNIX)
    connection.connect(where["socket"])
    return connection, connection.makefile("rw", encoding="utf-8", newline="\n")

def ask(stream, **fields):
    stream.write(json.dumps(fields) + "\n")
    stream.flush()
    while True:
        message = json.loads(stream.readline())
        if "push" not in message:
            return message

def outcome(message):
    return "ok" if "ok" in message else message["error"]["code"] + ": " + message["error"]["message"]

streams = []
for number in range(3):
    connection, stream = connect()
    first = ask(stream, id=1, op="hello", version=1)
    print("connection", number + 1, outcome(first))
    if "ok" in first:
        streams.append((connection, stream))
# Subscriptions, presenters and claims, spread over the two connections it has.
for kind, request in [("subscription", dict(op="subscribe", path="/", recursive=True)),
                      ("presenter", dict(op="present", path="/shared.txt", answers=["save"])),
                      ("claim", dict(op="claim", read=["/shared.txt"], nonblock=True))]:
    for number in range(3):
        _, stream = streams[number % len(streams)]
        print(kind, number + 1, outcome(ask(stream, id=10 + number, **request)))
status = ask(streams[0][1], id=99, op="status")["ok"]
print("limits", json.dumps(status["userLimits"], sort_keys=True))
print("users", json.dumps(status["users"], sort_keys=True))
