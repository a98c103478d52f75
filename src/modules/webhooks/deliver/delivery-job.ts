/** The data of a delivery job: everything else is read from the delivery row when it runs. */
export interface DeliveryJobData {
  deliveryId: string;
}

/** Job id of the delivery of one outbox event to one endpoint: re-adding it is a no-op. */
export function deliveryJobId(outboxId: string | number, endpointId: string): string {
  return `wh-${outboxId}-${endpointId}`;
}
