import { catalog } from '../../lib/prices';
import { catalogChanged } from './actions';

export const dynamic = 'force-dynamic';

export default async function CatalogPage() {
  const { version } = await catalog();
  return (
    <form action={catalogChanged}>
      <p id="catalog">{`catalog version ${version}`}</p>
      <button type="submit">Catalog changed</button>
    </form>
  );
}
