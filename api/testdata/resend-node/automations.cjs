// Drives Posthaste's automations with Resend's official Node SDK (6.x),
// unchanged: resend.automations.create with every step type and every
// connection type in the SDK's camelCase, list (with its status filter),
// get, update, duplicate, stop and remove, resend.automations.runs.list
// (with its status filter) and runs.get, and resend.events.send starting
// a run. Run by TestResendNodeSDKAutomations (api/automations_test.go)
// with RESEND_BASE_URL and RESEND_API_KEY set; prints one JSON line of
// results or exits non-zero with the SDK error. No worker runs in the
// api tests: a run stays running with no steps taken.
'use strict';
const { Resend } = require('resend');

const { must, refused } = require('./must.cjs');

(async () => {
  const resend = new Resend(process.env.RESEND_API_KEY);

  const template = must('templates.create', await resend.templates.create({
    name: 'welcome',
    from: 'Acme <onboarding@posthaste.test>',
    subject: 'Welcome {{{NAME}}}',
    html: '<p>Hi {{{NAME}}}</p>',
    variables: [{ key: 'NAME', type: 'string', fallbackValue: 'friend' }],
  }));
  must('templates.publish', await resend.templates.publish(template.id));
  const segment = must('segments.create', await resend.segments.create({ name: 'VIP' }));

  const created = must('automations.create', await resend.automations.create({
    name: 'Onboarding',
    status: 'enabled',
    steps: [
      { key: 'start', type: 'trigger', config: { eventName: 'user.signed_up' } },
      { key: 'wait', type: 'delay', config: { duration: '2 days' } },
      {
        key: 'welcome',
        type: 'send_email',
        config: { template: { id: template.id, variables: { NAME: { var: 'event.name' } } } },
      },
      {
        key: 'await',
        type: 'wait_for_event',
        config: {
          eventName: 'purchase.completed',
          timeout: '7 days',
          filterRule: { type: 'rule', field: 'event.amount', operator: 'gte', value: 10 },
        },
      },
      {
        key: 'is_pro',
        type: 'condition',
        config: {
          type: 'and',
          rules: [
            { type: 'rule', field: 'event.plan', operator: 'eq', value: 'pro' },
            { type: 'rule', field: 'contact.email', operator: 'ends_with', value: '@example.com' },
          ],
        },
      },
      { key: 'mark', type: 'contact_update', config: { firstName: { var: 'event.name' } } },
      { key: 'vip', type: 'add_to_segment', config: { segmentId: segment.id } },
      { key: 'forget', type: 'contact_delete', config: {} },
    ],
    connections: [
      { from: 'start', to: 'wait' },
      { from: 'wait', to: 'welcome', type: 'default' },
      { from: 'welcome', to: 'await', type: 'default' },
      { from: 'await', to: 'is_pro', type: 'event_received' },
      { from: 'await', to: 'forget', type: 'timeout' },
      { from: 'is_pro', to: 'mark', type: 'condition_met' },
      { from: 'is_pro', to: 'vip', type: 'condition_not_met' },
      { from: 'mark', to: 'vip', type: 'default' },
      { from: 'vip', to: 'forget', type: 'default' },
    ],
  }));
  const id = created.id;
  must('automations.create disabled', await resend.automations.create({
    name: 'Off',
    steps: [{ key: 'start', type: 'trigger', config: { eventName: 'user.signed_up' } }],
    connections: [],
  }));
  const got = must('automations.get', await resend.automations.get(id));
  const list = must('automations.list', await resend.automations.list({ limit: 10 }));
  const enabled = must('automations.list enabled', await resend.automations.list({ status: 'enabled' }));

  const sent = must('events.send', await resend.events.send({
    event: 'user.signed_up', email: 'ada@example.com', payload: { name: 'Ada', plan: 'pro' },
  }));
  const again = must('events.send again', await resend.events.send({
    event: 'user.signed_up', contactId: sent.contact_id, payload: { name: 'Ada' },
  }));
  const runs = must('automations.runs.list', await resend.automations.runs.list({ automationId: id }));
  const run = must('automations.runs.get', await resend.automations.runs.get({ automationId: id, runId: sent.runs[0] }));

  const invalid = refused('automations.update invalid', await resend.automations.update(id, {
    steps: [
      { key: 'start', type: 'trigger', config: { eventName: 'user.signed_up' } },
      { key: 'wait', type: 'delay', config: { duration: '3 fortnights' } },
    ],
    connections: [{ from: 'start', to: 'wait' }],
  }));
  const updated = must('automations.update', await resend.automations.update(id, {
    name: 'Onboarding v2',
    steps: [
      { key: 'start', type: 'trigger', config: { eventName: 'user.signed_up' } },
      { key: 'wait', type: 'delay', config: { duration: '1 hour' } },
    ],
    connections: [{ from: 'start', to: 'wait', type: 'default' }],
  }));
  const afterUpdate = must('automations.get after update', await resend.automations.get(id));
  const duplicate = must('automations.duplicate', await resend.automations.duplicate(id));
  const copy = must('automations.get copy', await resend.automations.get(duplicate.id));

  const stopped = must('automations.stop', await resend.automations.stop(id));
  const cancelled = must('automations.runs.list cancelled', await resend.automations.runs.list({
    automationId: id, status: ['cancelled'],
  }));
  const badStatus = refused('automations.runs.list bogus', await resend.automations.runs.list({
    automationId: id, status: 'bogus',
  }));

  const removed = must('automations.remove', await resend.automations.remove(id));
  const gone = refused('automations.get removed', await resend.automations.get(id));
  const runsGone = refused('automations.runs.list removed', await resend.automations.runs.list({ automationId: id }));

  console.log(JSON.stringify({
    template: template.id, segment: segment.id, created, got, list, enabled, sent, again, runs, run,
    invalid, updated, afterUpdate, duplicate, copy, stopped, cancelled, badStatus, removed, gone, runsGone,
  }));
})().catch((e) => { console.error(e); process.exit(1); });
