import { prices } from '../../lib/prices';

export const dynamic = 'force-dynamic';

export default async function PricesPage() {
  const { run, at, rates } = await prices();
  return <p id="prices">{`run ${run} at ${at}, USD ${rates.get('USD')}`}</p>;
}
