package io.github.txnsession.kafka;

import org.apache.kafka.common.config.ConfigException;
import org.jspecify.annotations.Nullable;

/**
 * A session config is missing or invalid. The message names the key, what was wrong and what to do.
 */
public class InvalidSessionConfigException extends ConfigException {

    private static final long serialVersionUID = 1L;

    /** The config key at fault, as given to the constructor. */
    private final String key;

    /**
     * @param key the config key at fault
     * @param value the value given (null when missing)
     * @param message what is wrong and what to do
     */
    public InvalidSessionConfigException(String key, @Nullable Object value, String message) {
        super(key, value, message);
        this.key = key;
    }

    /** @return the config key at fault */
    public String key() {
        return this.key;
    }
}
