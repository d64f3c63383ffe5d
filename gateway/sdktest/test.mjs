// Drives ogpu gateway with the official openai SDK, as an application
// would. Run by gateway/sdk_test.go (TestOpenAISDK), which starts a chain,
// providers and the gateway, then checks the chain against what this
// prints (one JSON line). Environment: OPENAI_BASE_URL, OPENAI_API_KEY,
// MODEL, CONTEXT_LENGTH. Argument: "main", "budget" or "noproviders" (job
// mode); "session", "death", "deathall" (session mode).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import OpenAI from 'openai';

const phase = process.argv[2];
const model = process.env.MODEL;
// Count the HTTP requests the SDK makes (its retries included).
let posts = 0;
const client = new OpenAI({
  fetch: (url, init) => {
    if (init?.method === 'POST') posts++;
    return fetch(url, init);
  },
});
const messages = [{ role: 'user', content: 'Once upon a time' }];
const out = { sdk: JSON.parse(readFileSync(new URL('./node_modules/openai/package.json', import.meta.url))).version };

async function expectError(p, status, code) {
  const before = posts;
  await assert.rejects(p, (err) => {
    assert.ok(err instanceof OpenAI.APIError, `${err}`);
    assert.equal(err.status, status, err.message);
    assert.equal(err.code, code, err.message);
    return true;
  });
  return posts - before;
}

if (phase === 'main') {
  // The model list.
  const ids = [];
  for await (const m of client.models.list()) {
    ids.push(m.id);
    if (m.id === model) {
      assert.equal(m.object, 'model');
      assert.equal(m.context_length, Number(process.env.CONTEXT_LENGTH));
      assert.ok(m.ogpu.providers >= 2);
    }
  }
  assert.deepEqual(ids, [model]);

  // A chat completion, not streamed: verified text, usage, cost, receipt.
  const { data: chat, response } = await client.chat.completions
    .create({ model, messages, max_tokens: 16, temperature: 0.7, top_p: 0.9 })
    .withResponse();
  assert.equal(response.headers.get('x-should-retry'), 'false');
  assert.equal(chat.object, 'chat.completion');
  assert.equal(chat.system_fingerprint, 'ogpu-greedy');
  const text = chat.choices[0].message.content;
  assert.ok(text.length > 0);
  assert.equal(chat.choices[0].message.role, 'assistant');
  assert.equal(chat.usage.completion_tokens, 16);
  assert.ok(chat.usage.cost > 0);
  assert.equal(chat.ogpu.verified, true);
  assert.equal(chat.ogpu.mode, 'job');
  assert.deepEqual(chat.ogpu.ignored_parameters, ['temperature', 'top_p']);
  assert.equal(response.headers.get('x-ogpu-job'), String(chat.ogpu.job));
  out.chat = { job: chat.ogpu.job, text, cost: chat.usage.cost, charged: chat.ogpu.charged };

  // The same chat streamed, with usage in the stream.
  const stream = await client.chat.completions.create({
    model, messages, max_tokens: 16, stream: true, stream_options: { include_usage: true },
  });
  let streamed = '';
  let chunks = 0;
  let role = '';
  let finish = null;
  let usage = null;
  let receipt = null;
  for await (const chunk of stream) {
    chunks++;
    if (chunk.choices.length === 0) {
      usage = chunk.usage;
      continue;
    }
    const c = chunk.choices[0];
    if (c.delta.role) role = c.delta.role;
    if (c.delta.content) streamed += c.delta.content;
    if (c.finish_reason) {
      finish = c.finish_reason;
      receipt = chunk.ogpu;
    }
  }
  assert.equal(role, 'assistant');
  assert.equal(streamed, text, 'greedy decoding: the stream says what the chat said');
  assert.equal(finish, 'length');
  assert.ok(usage, 'a usage chunk');
  assert.equal(usage.completion_tokens, 16);
  assert.ok(usage.cost > 0);
  assert.equal(receipt.verified, true);
  assert.ok(chunks > 4, `${chunks} chunks`);
  out.stream = { job: receipt.job, text: streamed, cost: usage.cost, charged: receipt.charged, chunks };

  // A legacy completion.
  const cmpl = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 16 });
  assert.equal(cmpl.object, 'text_completion');
  assert.equal(cmpl.choices[0].text, text);
  out.completion = { job: cmpl.ogpu.job, charged: cmpl.ogpu.charged };

  // An unknown model: NotFoundError, not retried.
  out.notFoundPosts = await expectError(
    client.chat.completions.create({ model: 'gpt-4o', messages }), 404, 'model_not_found');
  assert.equal(out.notFoundPosts, 1);
} else if (phase === 'session') {
  // Session mode: the same API, requests paid by vouchers on a lease.
  const ids = [];
  for await (const m of client.models.list()) ids.push(m.id);
  assert.deepEqual(ids, [model]);

  const { data: chat, response } = await client.chat.completions
    .create({ model, messages, max_tokens: 16 })
    .withResponse();
  const text = chat.choices[0].message.content;
  assert.ok(text.length > 0);
  assert.equal(chat.ogpu.mode, 'session');
  assert.equal(chat.ogpu.verified, true);
  assert.equal(chat.ogpu.price_unit, 'token');
  assert.equal(chat.ogpu.lanes.length, 2);
  assert.equal(chat.usage.completion_tokens, 16);
  assert.ok(chat.usage.cost > 0);
  assert.equal(response.headers.get('x-ogpu-session'), chat.ogpu.session);
  assert.equal(response.headers.get('x-should-retry'), 'false');
  out.chat = { session: chat.ogpu.session, text, cost: chat.usage.cost, charged: chat.ogpu.charged };

  const stream = await client.chat.completions.create({
    model, messages, max_tokens: 16, stream: true, stream_options: { include_usage: true },
  });
  let streamed = '';
  let usage = null;
  let receipt = null;
  for await (const chunk of stream) {
    if (chunk.choices.length === 0) {
      usage = chunk.usage;
      continue;
    }
    if (chunk.choices[0].delta.content) streamed += chunk.choices[0].delta.content;
    if (chunk.choices[0].finish_reason) receipt = chunk.ogpu;
  }
  assert.equal(streamed, text);
  assert.ok(usage, 'a usage chunk');
  assert.equal(usage.completion_tokens, 16);
  assert.equal(receipt.session, chat.ogpu.session);
  assert.equal(receipt.verified, true);
  out.stream = { session: receipt.session, text: streamed, cost: usage.cost, charged: receipt.charged };

  out.notFoundPosts = await expectError(
    client.chat.completions.create({ model: 'gpt-4o', messages }), 404, 'model_not_found');
  assert.equal(out.notFoundPosts, 1);
} else if (phase === 'death') {
  // A provider dies mid-stream (the Go test kills it at the third
  // token): the other lane finishes, and the SDK sees a whole answer.
  const stream = await client.chat.completions.create({ model, messages, max_tokens: 16, stream: true });
  let streamed = '';
  let receipt = null;
  for await (const chunk of stream) {
    if (chunk.choices[0]?.delta.content) streamed += chunk.choices[0].delta.content;
    if (chunk.choices[0]?.finish_reason) receipt = chunk.ogpu;
  }
  assert.ok(receipt, 'a final chunk');
  out.stream = { session: receipt.session, text: streamed, charged: receipt.charged, verified: receipt.verified, providers: receipt.providers };
} else if (phase === 'deathall') {
  // Every lane's provider dies mid-stream: the SDK raises the error event.
  const before = posts;
  let streamed = '';
  await assert.rejects(
    (async () => {
      const stream = await client.chat.completions.create({ model, messages, max_tokens: 16, stream: true });
      for await (const chunk of stream) {
        if (chunk.choices[0]?.delta.content) streamed += chunk.choices[0].delta.content;
      }
    })(),
    (err) => {
      assert.ok(err instanceof OpenAI.APIError, `${err}`);
      out.deathError = { code: err.code, message: err.message };
      return true;
    });
  out.deathPosts = posts - before;
  out.deathStreamed = streamed;
} else if (phase === 'budget') {
  // The day's budget is gone: 402, and the SDK does not retry (x-should-retry: false).
  out.budgetPosts = await expectError(
    client.chat.completions.create({ model, messages, max_tokens: 16 }), 402, 'budget_exceeded');
  assert.equal(out.budgetPosts, 1);
  out.budgetStreamPosts = await expectError(
    client.chat.completions.create({ model, messages, max_tokens: 16, stream: true }), 402, 'budget_exceeded');
  assert.equal(out.budgetStreamPosts, 1);
} else if (phase === 'noproviders') {
  // Too few providers: 503, which the SDK retries twice unless told not
  // to (x-should-retry: false).
  out.noProvidersPosts = await expectError(
    client.chat.completions.create({ model, messages, max_tokens: 16 }), 503, 'no_providers');
  assert.equal(out.noProvidersPosts, 1);
} else {
  throw new Error(`phase ${phase}: want main, budget, noproviders, session, death or deathall`);
}
console.log(JSON.stringify(out));
