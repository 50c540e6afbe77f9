/** The jobs plugin's public contract: jobs as other plugins read them (a scenario's `run_job` step). */
import { pluginServiceRef } from '../../kernel/plugin-api.ts';
import type { BuildMode } from '../pipeline/public.ts';

/** A job as GET /api/pipeline/jobs/{id} answers it. */
export interface JobSummary {
  id: number;
  project_id: number;
  name: string;
  targets: number[];
  mode: BuildMode;
}

export interface PipelineJobs {
  /** The job, or null when it is not one of the organization's. */
  find(orgId: number, id: number): Promise<JobSummary | null>;
}

export const pipelineJobs = pluginServiceRef<PipelineJobs>('jobs.catalog');
