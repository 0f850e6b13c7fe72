// A Hubbub bot in JavaScript: the `signup` flow (one form screen, then a summary) and a chat with a menu.
//
// Built into a component of the WIT world `hubbub:bot@0.1.0` by jco / ComponentizeJS (see build.sh
// beside this file, or guest-sdk/docs/javascript.md). WIT variants are `{ tag, val }` objects, enums are
// strings, `option<T>` is a value or `undefined`, and throwing a string answers `result::err`. The
// session state is JSON, passed back by the host on every event.

import { log } from 'hubbub:bot/log@0.1.0';

const FLOW = 'signup';
const SCREEN = 'details';

const field = (key, type, label, { required = true, placeholder, options = [] } = {}) => ({
  key,
  type,
  label,
  required,
  placeholder,
  options: options.map(([id, label]) => ({ id, label })),
});

const detailsScreen = () => ({
  id: SCREEN,
  title: 'Your details',
  kind: 'form',
  fields: [
    field('name', 'text', 'Name', { placeholder: 'Ana' }),
    field('email', 'email', 'E-mail'),
    field('plan', 'select', 'Plan', { options: [['free', 'Free'], ['pro', 'Pro']] }),
    field('newsletter', 'boolean', 'Newsletter', { required: false }),
  ],
});

const chatMenu = () => ({
  text: 'What can I do for you?',
  style: 'button',
  sections: [
    {
      title: undefined,
      items: [
        { id: 'hello', label: 'Say hello', description: undefined },
        { id: 'plans', label: 'Plans', description: 'What the plans cost' },
      ],
    },
  ],
});

const reply = (steps, state) => ({ steps, state: JSON.stringify(state) });

export const handler = {
  flows() {
    return [{ code: FLOW, title: 'Sign up (JavaScript)' }];
  },

  start(entry, ctx) {
    if (entry.tag === 'chat') {
      return reply([{ tag: 'menu', val: chatMenu() }], { mode: 'chat' });
    }
    if (entry.val !== FLOW) {
      throw `unknown flow ${entry.val}`;
    }
    log('info', `signup started for ${ctx.phone}`);
    return reply([{ tag: 'screen', val: detailsScreen() }], { mode: 'flow', submits: 0 });
  },

  handle(state, event, ctx) {
    const session = state ? JSON.parse(state) : {};
    if (session.mode === 'chat') {
      let text = 'Pick an item of the menu.';
      if (event.tag === 'select') {
        text = event.val === 'plans' ? 'Free costs nothing; Pro is 5 EUR a month.' : `Hello ${ctx.phone}!`;
      }
      return reply([{ tag: 'message', val: text }, { tag: 'menu', val: chatMenu() }], session);
    }
    if (event.tag !== 'submit' || event.val.screen !== SCREEN) {
      throw 'expected the details screen';
    }
    // The host validated the values against the screen's fields: they are typed already.
    const values = new Map(event.val.values.map(({ key, value }) => [key, value]));
    session.submits = (session.submits ?? 0) + 1;
    const summary = ['name', 'email', 'plan']
      .filter((key) => values.has(key))
      .map((key) => ({ key, value: values.get(key) }));
    summary.push({ key: 'newsletter', value: values.get('newsletter') ?? { tag: 'boolean', val: false } });
    log('info', `signup completed by ${ctx.phone}`);
    return reply([{ tag: 'completed', val: summary }], session);
  },
};
