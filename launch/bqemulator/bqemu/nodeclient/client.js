// Drives the BigQuery emulator with Google's official Node.js client,
// @google-cloud/bigquery (pinned in package.json and package-lock.json), as
// a user's program would: create a dataset and a table, insert rows
// (tabledata.insertAll), read them back (tabledata.list), and run queries
// (jobs.query / jobs.getQueryResults). It prints one JSON object with what
// it saw; launch/bqemulator/bqemu/sqlengine/clients_test.go checks it.
//
// Usage: BIGQUERY_EMULATOR_HOST=http://127.0.0.1:PORT node client.js PROJECT
'use strict';

const {BigQuery} = require('@google-cloud/bigquery');
const {OAuth2Client} = require('google-auth-library');

async function main() {
  const projectId = process.argv[2];
  if (!process.env.BIGQUERY_EMULATOR_HOST || !projectId) {
    throw new Error('usage: BIGQUERY_EMULATOR_HOST=http://HOST:PORT node client.js PROJECT');
  }
  // The emulator needs no credentials; a fixed token keeps the client from
  // looking for Application Default Credentials.
  const authClient = new OAuth2Client();
  authClient.setCredentials({access_token: 'emulator', expiry_date: Date.now() + 3600e3});
  const bigquery = new BigQuery({projectId, authClient});

  const [dataset] = await bigquery.createDataset('node_client');
  const [table] = await dataset.createTable('readings', {
    schema: {
      fields: [
        {name: 'sensor_id', type: 'STRING', mode: 'REQUIRED'},
        {name: 'event_timestamp', type: 'TIMESTAMP', mode: 'REQUIRED'},
        {name: 'heart_rate', type: 'FLOAT'},
        {name: 'reading_id', type: 'STRING', mode: 'REQUIRED'},
        {name: 'ingested_at', type: 'TIMESTAMP'},
      ],
    },
    timePartitioning: {type: 'DAY', field: 'event_timestamp'},
    tableConstraints: {primaryKey: {columns: ['reading_id']}},
  });
  const [meta] = await table.getMetadata();

  const now = new Date();
  const rows = [];
  for (let i = 0; i < 3; i++) {
    const at = new Date(now.getTime() - i * 60e3).toISOString();
    rows.push({sensor_id: 'patient-001', event_timestamp: at, heart_rate: 70 + i, reading_id: `r${i}`, ingested_at: now.toISOString()});
    // A later copy of the same reading: the dedup query keeps it.
    rows.push({sensor_id: 'patient-001', event_timestamp: at, heart_rate: 80 + i, reading_id: `r${i}`, ingested_at: new Date(now.getTime() + 1000).toISOString()});
  }
  await table.insert(rows);
  const [read] = await table.getRows();

  const [counts] = await bigquery.query({
    query: 'SELECT COUNT(*) AS n, COUNT(DISTINCT reading_id) AS readings FROM node_client.readings',
  });
  const [dedup] = await bigquery.query({
    query: `SELECT * EXCEPT (n) FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY reading_id ORDER BY ingested_at DESC) AS n
  FROM \`${projectId}.node_client.readings\`
  WHERE event_timestamp >= TIMESTAMP_SUB(CURRENT_TIMESTAMP(), INTERVAL 1 DAY))
WHERE n = 1
ORDER BY reading_id`,
  });
  let badQuery = '';
  try {
    await bigquery.query({query: 'SELECT nope FROM node_client.readings'});
  } catch (e) {
    badQuery = e.message;
  }

  process.stdout.write(JSON.stringify({
    primaryKey: (meta.tableConstraints && meta.tableConstraints.primaryKey.columns) || [],
    rowsRead: read.length,
    count: counts[0].n,
    distinct: counts[0].readings,
    dedupHeartRates: dedup.map(r => r.heart_rate),
    dedupTimestampIsDate: dedup.length > 0 && typeof dedup[0].event_timestamp.value === 'string',
    badQuery,
  }) + '\n');
}

main().catch(err => {
  process.stderr.write(`node client: ${err.stack || err}\n`);
  process.exit(1);
});
