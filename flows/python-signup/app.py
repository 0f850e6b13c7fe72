"""A Hubbub bot in Python: the `signup` flow (one form screen, then a summary) and a chat with a menu.

Built into a component of the WIT world `hubbub:bot@0.1.0` by componentize-py (see build.sh beside this
file, or guest-sdk/docs/python.md). The session state is JSON, passed back by the host on every event.
"""

import json

from componentize_py_types import Err
from wit_world import exports
from wit_world.imports import log, types, forms, menus, replies

FLOW = "signup"
SCREEN = "details"
PLANS = [("free", "Free"), ("pro", "Pro")]


def field(key, kind, label, required=True, placeholder=None, options=()):
    return types.Field(
        key=key,
        type=kind,
        label=label,
        required=required,
        placeholder=placeholder,
        options=[types.Choice(id=i, label=l) for i, l in options],
    )


def details_screen():
    return forms.Screen(
        id=SCREEN,
        title="Your details",
        kind=forms.ScreenKind.FORM,
        fields=[
            field("name", types.FieldType.TEXT, "Name", placeholder="Ana"),
            field("email", types.FieldType.EMAIL, "E-mail"),
            field("plan", types.FieldType.SELECT, "Plan", options=PLANS),
            field("newsletter", types.FieldType.BOOLEAN, "Newsletter", required=False),
        ],
    )


def chat_menu():
    items = [
        menus.MenuItem(id="hello", label="Say hello", description=None),
        menus.MenuItem(id="plans", label="Plans", description="What the plans cost"),
    ]
    return menus.Menu(
        text="What can I do for you?",
        style=menus.MenuStyle.BUTTON,
        sections=[menus.MenuSection(title=None, items=items)],
    )


def reply(steps, state):
    return replies.Reply(steps=steps, state=json.dumps(state))


class Handler(exports.Handler):
    def flows(self):
        return [replies.FlowInfo(code=FLOW, title="Sign up (Python)")]

    def start(self, entry, ctx):
        if isinstance(entry, replies.Entry_Chat):
            return reply([replies.Step_Menu(chat_menu())], {"mode": "chat"})
        if entry.value != FLOW:
            raise Err(f"unknown flow {entry.value}")
        log.log(log.Level.INFO, f"signup started for {ctx.phone}")
        return reply([replies.Step_Screen(details_screen())], {"mode": "flow", "submits": 0})

    def handle(self, state, event, ctx):
        session = json.loads(state) if state else {}
        if session.get("mode") == "chat":
            if isinstance(event, replies.UserEvent_Select) and event.value == "plans":
                text = "Free costs nothing; Pro is 5 EUR a month."
            elif isinstance(event, replies.UserEvent_Select):
                text = f"Hello {ctx.phone}!"
            else:
                text = "Pick an item of the menu."
            return reply([replies.Step_Message(text), replies.Step_Menu(chat_menu())], session)
        if not isinstance(event, replies.UserEvent_Submit) or event.value.screen != SCREEN:
            raise Err("expected the details screen")
        # The host validated the values against the screen's fields: they are typed already.
        values = {v.key: v.value for v in event.value.values}
        session["submits"] = session.get("submits", 0) + 1
        summary = [types.FieldValue(key=k, value=values[k]) for k in ("name", "email", "plan") if k in values]
        newsletter = values.get("newsletter")
        summary.append(
            types.FieldValue(
                key="newsletter",
                value=newsletter if newsletter is not None else types.Value_Boolean(False),
            )
        )
        log.log(log.Level.INFO, f"signup completed by {ctx.phone}")
        return reply([replies.Step_Completed(summary)], session)
