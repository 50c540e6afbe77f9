import { definePlugin } from '../../kernel/plugin-api.ts';
import { cardType, cardTypes, type CardSql } from '../dashboards/public.ts';
import type { DatasetInfo } from '../datasets/public.ts';
import { columnOf } from './columns.ts';

interface ProcessMapConfig {
  dataset_id: number;
  case_column: string;
  activity_column: string;
  timestamp_column: string;
  min_edge_count?: number;
}

/** Rows one process map's statement may answer: its edges, three rows per activity and one. */
const MAX_ROWS = 10_000;

/**
 * The directly-follows graph of an event log as one governed statement: each case's events in
 * time order (ties by activity, so the order is the same on every run), each event paired with the
 * next of its case. Nodes, start and end activities and the case count come in the same result,
 * told apart by `kind` and ordered ahead of the edges (a map too large for the row limit loses its
 * rarest edges, never its nodes or counts); an edge's median duration is the mean of its one or two
 * middle durations.
 */
function processMapSql(q: CardSql, source: DatasetInfo, config: ProcessMapConfig): string {
  const [caseId, activity, time] = [q.id(config.case_column), q.id(config.activity_column), q.id(config.timestamp_column)];
  const minimum = q.value(config.min_edge_count ?? 1);
  return `with events as (
  select cast(${caseId} as text) as case_id, cast(${activity} as text) as activity, ${time} as at,
    row_number() over (partition by ${caseId} order by ${time}, ${activity}) as step,
    count(*) over (partition by ${caseId}) as steps
  from ${q.from(source)}
  where ${caseId} is not null and ${activity} is not null and ${time} is not null
), followed as (
  select activity, at, lead(activity) over (partition by case_id order by step) as next_activity, lead(at) over (partition by case_id order by step) as next_at
  from events
), transitions as (
  select activity as source, next_activity as target, ${q.secondsBetween('at', 'next_at')} as seconds
  from followed where next_activity is not null
), ranked as (
  select source, target, seconds,
    row_number() over (partition by source, target order by seconds) as position,
    count(*) over (partition by source, target) as total
  from transitions
)
select * from (
  select 'edge' as kind, source as activity, target, count(*) as n, avg(seconds) as mean_s,
    avg(case when position = (total + 1) / 2 or position = (total + 2) / 2 then seconds end) as median_s
  from ranked group by source, target having count(*) >= ${minimum}
  union all select 'node', activity, null, count(*), null, null from events group by activity
  union all select 'start', activity, null, count(*), null, null from events where step = 1 group by activity
  union all select 'end', activity, null, count(*), null, null from events where step = steps group by activity
  union all select 'cases', null, null, count(distinct case_id), null, null from events
) as graph
order by case kind when 'cases' then 0 when 'node' then 1 when 'start' then 2 when 'end' then 3 else 4 end, n desc`;
}

/** Seconds to the millisecond: the two databases' floating arithmetic differ below that. */
const seconds = (value: unknown) => (value === null ? null : Math.round(Number(value) * 1000) / 1000);
const byCount = <T extends { count: number }>(items: T[], name: (item: T) => string) => items.sort((a, b) => b.count - a.count || name(a).localeCompare(name(b)));

/** `process_map`: the directly-follows graph of an event log, computed in the database. */
export default definePlugin({
  deps: {},
  init: (_services, ctx) =>
    ctx.contribute(
      cardTypes,
      cardType<ProcessMapConfig>({
        type: 'process_map',
        description:
          'The directly-follows graph of an event log (process mining), computed in the database: each case\u2019s events in time order; nodes are activities with their event counts, edges the transitions from one activity to the next in a case with their count and mean and median duration in seconds; start and end activities; the number of cases. Edges seen fewer than `min_edge_count` times are left out. Filtered by the dashboard.',
        config: {
          type: 'object',
          properties: {
            dataset_id: { type: 'integer', minimum: 1, maximum: 2_147_483_647 },
            case_column: { type: 'string', minLength: 1, maxLength: 63 },
            activity_column: { type: 'string', minLength: 1, maxLength: 63 },
            timestamp_column: { type: 'string', minLength: 1, maxLength: 63 },
            min_edge_count: { type: 'integer', minimum: 1, maximum: 1_000_000_000, default: 1 },
          },
          required: ['dataset_id', 'case_column', 'activity_column', 'timestamp_column'],
          additionalProperties: false,
        },
        check: async ({ config, at, dataset }) => {
          const source = await dataset(config.dataset_id, `${at}.dataset_id`);
          columnOf(source, config.case_column, `${at}.case_column`, ['string', 'integer']);
          columnOf(source, config.activity_column, `${at}.activity_column`, ['string', 'integer']);
          columnOf(source, config.timestamp_column, `${at}.timestamp_column`, ['timestamp', 'date']);
        },
        data: async ({ config, dataset, query }) => {
          const source = await dataset(config.dataset_id, 'config.dataset_id');
          const result = await query((q) => processMapSql(q, source, config), { limit: MAX_ROWS });
          const nodes: { activity: string; count: number }[] = [];
          const starts: { activity: string; count: number }[] = [];
          const ends: { activity: string; count: number }[] = [];
          const edges: { from: string; to: string; count: number; mean_duration_s: number | null; median_duration_s: number | null }[] = [];
          let cases = 0;
          for (const [kind, activity, target, n, mean, median] of result.rows) {
            const count = Number(n);
            if (kind === 'edge') edges.push({ from: String(activity), to: String(target), count, mean_duration_s: seconds(mean), median_duration_s: seconds(median) });
            else if (kind === 'node') nodes.push({ activity: String(activity), count });
            else if (kind === 'start') starts.push({ activity: String(activity), count });
            else if (kind === 'end') ends.push({ activity: String(activity), count });
            else cases = count;
          }
          byCount(nodes, (n) => n.activity);
          byCount(starts, (n) => n.activity);
          byCount(ends, (n) => n.activity);
          byCount(edges, (e) => `${e.from}\u0000${e.to}`);
          return {
            data: { nodes, edges, start_activities: starts, end_activities: ends, cases, truncated: result.truncated },
            table: { columns: ['from', 'to', 'count', 'mean_duration_s', 'median_duration_s'], rows: edges.map((e) => [e.from, e.to, e.count, e.mean_duration_s, e.median_duration_s]) },
          };
        },
      }),
    ),
});
