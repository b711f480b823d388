import { countRender, slow } from '../../lib/renders';

// An ISR page regenerated at most once a second: once across every process sharing the Redis.
export const revalidate = 1;

export default async function IsrPage() {
  const render = await countRender('isr');
  await slow(50);
  return <p id="isr">{`render ${render} at ${new Date().toISOString()} by ${process.pid}`}</p>;
}
