"""A presenter of one file on the mount's control socket: `presenter.py PATH ANSWERS BEHAVIOUR CONTENT`.

Prints `ready` once registered, `ask KIND PATH REQUESTER` per ask and `answered accepted` per
reply to an answer. BEHAVIOUR: `save` writes CONTENT to the file through the mount, then
answers ok; `refuse` refuses; `silent` never answers.
"""
import json, os, socket, sys
target, answers, behaviour, content = sys.argv[1:5]
where = json.loads(os.getxattr(target, "user.coordfs.control"))
connection = socket.socket(socket.AF_UNIX)
connection.connect(where["socket"])
stream = connection.makefile("rw", encoding="utf-8", newline="\n")
def send(**fields):
    stream.write(json.dumps(fields) + "\n")
    stream.flush()
def reply():
    message = json.loads(stream.readline())
    assert "ok" in message, message
    return message["ok"]
send(id=1, op="hello", version=1, client="test presenter")
reply()
send(id=2, op="present", path=where["path"], answers=answers.split(","))
presenter = reply()["presenter"]
print("ready", flush=True)
for number, line in enumerate(stream, start=3):
    message = json.loads(line)
    if "id" in message:
        print("answered", "accepted" if message.get("ok", {}).get("accepted") else message, flush=True)
    elif message["push"] == "ask":
        print("ask", message["kind"], message["path"], message["requester"], flush=True)
        if behaviour == "save":
            with open(target, "w") as file:
                file.write(content)
        if behaviour != "silent":
            send(id=number, op="answer", presenter=presenter, request=message["request"],
                 verdict="refuse" if behaviour == "refuse" else "ok", reason="unsaved changes")
    elif message["push"] == "notify":
        print("notify", message["kind"], message["path"], flush=True)
