// Smoke test of Warren's stream protocol with the RabbitMQ stream
// JavaScript client (rabbitmq-stream-js-client): create a stream, publish
// 100 messages and wait for every confirm, then consume from first and
// check count, order, contents and offsets. Exits 0 on success, 1 on any
// failure or after a deadline.
//
// Environment: WARREN_STREAM_HOST (default 127.0.0.1), WARREN_STREAM_PORT
// (default 5552), WARREN_STREAM_NAME (default a fresh name),
// WARREN_SMOKE_DEBUG=1 to log the client's debug output to stderr.
"use strict"

const rabbit = require("rabbitmq-stream-js-client")

const host = process.env.WARREN_STREAM_HOST || "127.0.0.1"
const port = parseInt(process.env.WARREN_STREAM_PORT || "5552", 10)
const streamName = process.env.WARREN_STREAM_NAME || `js-smoke-${process.pid}-${Date.now()}`
const count = 100
const deadlineMs = 30000

const logger = process.env.WARREN_SMOKE_DEBUG
  ? {
      debug: (m) => console.error(`debug: ${m}`),
      info: (m) => console.error(`info: ${m}`),
      warn: (m) => console.error(`warn: ${m}`),
      error: (m) => console.error(`error: ${m}`),
    }
  : undefined

function body(i) {
  return `js-message-${i}`
}

// waitFor resolves when cond() is true, polling every 10 ms, or rejects
// after ms with what.
function waitFor(cond, ms, what) {
  return new Promise((resolve, reject) => {
    const start = Date.now()
    const tick = () => {
      let done
      try {
        done = cond()
      } catch (err) {
        return reject(err)
      }
      if (done) return resolve()
      if (Date.now() - start > ms) return reject(new Error(`timed out waiting for ${what}`))
      setTimeout(tick, 10)
    }
    tick()
  })
}

async function main() {
  const client = await rabbit.connect(
    { hostname: host, port, username: "guest", password: "guest", vhost: "/", heartbeat: 0 },
    logger
  )
  try {
    await client.createStream({ stream: streamName, arguments: {} })

    // Publish with confirms: publishing ids are 1..count (the client
    // starts from the last sequence, 0 for a publisher without a reference).
    const publisher = await client.declarePublisher({ stream: streamName })
    const confirmed = new Set()
    const errors = []
    publisher.on("publish_confirm", (err, ids) => {
      if (err !== null) {
        errors.push(`publish error code ${err} for ids ${ids.join(",")}`)
        return
      }
      for (const id of ids) confirmed.add(id)
    })
    const sentIds = []
    for (let i = 0; i < count; i++) {
      const res = await publisher.send(Buffer.from(body(i)))
      sentIds.push(res.publishingId)
    }
    await publisher.flush()
    await waitFor(
      () => {
        if (errors.length > 0) throw new Error(errors.join("; "))
        return confirmed.size >= count
      },
      10000,
      `${count} confirms (have ${confirmed.size})`
    )
    for (const id of sentIds) {
      if (!confirmed.has(id)) throw new Error(`publishing id ${id} not confirmed`)
    }
    await publisher.close()

    // Consume from first.
    const got = []
    const consumer = await client.declareConsumer(
      { stream: streamName, offset: rabbit.Offset.first() },
      (msg) => {
        got.push({ content: msg.content.toString("utf8"), offset: msg.offset })
      }
    )
    await waitFor(() => got.length >= count, 10000, `${count} messages (have ${got.length})`)
    // Let anything extra arrive before checking the count.
    await new Promise((r) => setTimeout(r, 200))
    if (got.length !== count) throw new Error(`consumed ${got.length} messages, want ${count}`)
    for (let i = 0; i < count; i++) {
      if (got[i].content !== body(i)) {
        throw new Error(`message ${i}: content ${JSON.stringify(got[i].content)}, want ${JSON.stringify(body(i))}`)
      }
      if (got[i].offset !== BigInt(i)) {
        throw new Error(`message ${i}: offset ${got[i].offset}, want ${i}`)
      }
    }
    await consumer.close()

    const stats = await client.streamStatsRequest(streamName)
    console.log(`stats: ${JSON.stringify(stats, (_k, v) => (typeof v === "bigint" ? v.toString() : v))}`)
    await client.deleteStream({ stream: streamName })
  } finally {
    await client.close()
  }
  console.log(`ok: published and consumed ${count} messages on ${streamName} at ${host}:${port}`)
}

const timer = setTimeout(() => {
  console.error(`FAIL: no result after ${deadlineMs} ms`)
  process.exit(1)
}, deadlineMs)

main()
  .then(() => {
    clearTimeout(timer)
    process.exit(0)
  })
  .catch((err) => {
    clearTimeout(timer)
    console.error(`FAIL: ${err && err.stack ? err.stack : err}`)
    process.exit(1)
  })
