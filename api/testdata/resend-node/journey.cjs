// Drives one automation end to end against `posthaste dev` with Resend's
// official Node SDK, unchanged (cmd/posthaste/e2e_automations_test.go).
// The SDK reads RESEND_BASE_URL; RESEND_API_KEY is the key. STEP says
// what to do, and the script prints one JSON line:
//   setup: define the events, create and enable the automation (trigger
//     "cart.abandoned" → delay DELAY → send_email TEMPLATE → wait for
//     "order.paid" with total > 10, or a timeout of TIMEOUT → condition on
//     the waited event → contact_update / add_to_segment SEGMENT), send
//     "cart.abandoned" for EMAIL; prints {automation, event}.
//   pay: send "order.paid" for EMAIL twice (total 5, then PAID_TOTAL);
//     prints {sent}.
//   runs: list the automation's runs and get each; prints {runs}.
'use strict';
const assert = require('node:assert/strict');
const { Resend } = require('resend');
const { must } = require('./must.cjs');

(async () => {
  const resend = new Resend(process.env.RESEND_API_KEY);
  const env = process.env;
  switch (env.STEP) {
    case 'setup': {
      must('events.create cart', await resend.events.create({ name: 'cart.abandoned', schema: { item: 'string', total: 'number' } }));
      must('events.create paid', await resend.events.create({ name: 'order.paid', schema: { total: 'number' } }));
      const bad = await resend.events.send({ event: 'cart.abandoned', email: env.EMAIL, payload: { total: 'lots' } });
      assert.ok(bad.error, 'a payload that does not match the schema is refused');
      assert.equal(bad.error.statusCode, 422);
      const created = must('automations.create', await resend.automations.create({
        name: 'Abandoned cart',
        steps: [
          { key: 'start', type: 'trigger', config: { eventName: 'cart.abandoned' } },
          { key: 'wait', type: 'delay', config: { duration: env.DELAY } },
          {
            key: 'remind', type: 'send_email', config: {
              template: { id: env.TEMPLATE, variables: { ITEM: { var: 'event.item' }, TOTAL: { var: 'event.total' } } },
            },
          },
          {
            key: 'paid', type: 'wait_for_event', config: {
              eventName: 'order.paid', timeout: env.TIMEOUT,
              filterRule: { type: 'rule', field: 'event.total', operator: 'gt', value: 10 },
            },
          },
          {
            key: 'big', type: 'condition', config: {
              type: 'and', rules: [
                { type: 'rule', field: 'wait_events.order.paid.total', operator: 'gte', value: 100 },
                { type: 'rule', field: 'contact.email', operator: 'ends_with', value: '.test' },
              ],
            },
          },
          { key: 'vip', type: 'add_to_segment', config: { segmentId: env.SEGMENT } },
          { key: 'note', type: 'contact_update', config: { firstName: { var: 'event.item' } } },
          { key: 'lapsed', type: 'contact_update', config: { lastName: 'Lapsed' } },
        ],
        connections: [
          { from: 'start', to: 'wait' },
          { from: 'wait', to: 'remind', type: 'default' },
          { from: 'remind', to: 'paid' },
          { from: 'paid', to: 'big', type: 'event_received' },
          { from: 'paid', to: 'lapsed', type: 'timeout' },
          { from: 'big', to: 'vip', type: 'condition_met' },
          { from: 'big', to: 'note', type: 'condition_not_met' },
        ],
      }));
      assert.equal(created.object, 'automation');
      const got = must('automations.get', await resend.automations.get(created.id));
      assert.equal(got.status, 'disabled');
      assert.equal(got.steps.length, 8);
      assert.equal(got.steps[1].config.duration, env.DELAY);
      assert.deepEqual(got.steps[3].config.filter_rule, { type: 'rule', field: 'event.total', operator: 'gt', value: 10 });
      must('automations.update', await resend.automations.update(created.id, { status: 'enabled' }));
      const sent = must('events.send', await resend.events.send({
        event: 'cart.abandoned', email: env.EMAIL, payload: { item: 'Teapot', total: 42 },
      }));
      assert.equal(sent.object, 'event');
      assert.equal(sent.event, 'cart.abandoned');
      console.log(JSON.stringify({ automation: created.id, event: sent.id }));
      break;
    }
    case 'pay': {
      must('events.send small', await resend.events.send({ event: 'order.paid', email: env.EMAIL, payload: { total: 5 } }));
      const sent = must('events.send paid', await resend.events.send({
        event: 'order.paid', email: env.EMAIL, payload: { total: Number(env.PAID_TOTAL) },
      }));
      console.log(JSON.stringify({ sent: sent.id }));
      break;
    }
    case 'runs': {
      const list = must('automations.runs.list', await resend.automations.runs.list({ automationId: env.AUTOMATION }));
      const runs = [];
      for (const item of list.data) {
        runs.push(must('automations.runs.get', await resend.automations.runs.get({ automationId: env.AUTOMATION, runId: item.id })));
      }
      console.log(JSON.stringify({ runs }));
      break;
    }
    default:
      throw new Error(`unknown STEP ${env.STEP}`);
  }
})().catch((e) => { console.error(e); process.exit(1); });
