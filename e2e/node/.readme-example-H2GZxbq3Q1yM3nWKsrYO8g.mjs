import taskcluster from 'taskcluster-client';

const queue = new taskcluster.Queue(taskcluster.fromEnvVars());
const taskId = taskcluster.slugid();
await queue.createTask(taskId, {
  taskQueueId: 'hopper/default', created: taskcluster.fromNowJSON(), deadline: taskcluster.fromNowJSON('1 hour'),
  payload: {command: [['echo', 'hi']], maxRunTime: 60},
  metadata: {name: 'hi', description: 'say hi', owner: 'me@example.com', source: 'https://example.com'},
});
console.log(`${process.env.TASKCLUSTER_ROOT_URL}/ui/#/task/${taskId}`);
